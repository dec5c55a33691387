package acidstream.hive;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.common.ValidReaderWriteIdList;
import org.apache.hadoop.hive.common.ValidTxnList;
import org.apache.hadoop.hive.ql.io.AcidDirectory;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hive.common.util.Ref;

/**
 * Hive's directory selection alone: {@code AcidUtils.getAcidState} for a table or partition directory at a
 * snapshot. Request: {@code dir}, {@code writeids}, {@code txns}. Answer: {@code base} (name or null),
 * {@code current} (the chosen deltas and delete deltas, in Hive's order), {@code obsolete} (sorted names).
 */
final class AcidSelection {
  private AcidSelection() {}

  static void select(JsonNode request, ObjectNode answer) throws Exception {
    JobConf conf = new JobConf();
    HadoopAccess.configure(conf, request);
    conf.set(ValidTxnList.VALID_TXNS_KEY, request.get("txns").asText());
    Path dir = new Path(request.get("dir").asText());
    FileSystem fs = dir.getFileSystem(conf);
    AcidDirectory state =
        AcidUtils.getAcidState(
            fs,
            dir,
            conf,
            new ValidReaderWriteIdList(request.get("writeids").asText()),
            Ref.from(false),
            false);
    Path base = state.getBaseDirectory();
    answer.put("base", base == null ? null : base.getName());
    ArrayNode current = answer.putArray("current");
    state.getCurrentDirectories().forEach(d -> current.add(d.getPath().getName()));
    List<String> obsolete = new ArrayList<>();
    state.getObsolete().forEach(p -> obsolete.add(p.getName()));
    Collections.sort(obsolete);
    obsolete.forEach(answer.putArray("obsolete")::add);
  }
}

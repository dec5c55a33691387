package acidstream.hive;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.ql.io.AcidOutputFormat;
import org.apache.hadoop.hive.ql.io.RecordUpdater;
import org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.typeinfo.PrimitiveTypeInfo;
import org.apache.hadoop.hive.serde2.typeinfo.TypeInfo;
import org.apache.hadoop.hive.serde2.typeinfo.TypeInfoUtils;

/**
 * Writes one bucket of a delta with Hive's own {@code OrcRecordUpdater} (split update: deletes and the delete
 * half of updates go to {@code delete_delta_*}), the writer under Hive's streaming API and its DML.
 *
 * <p>Request: {@code dir} (table or partition), {@code columns}, {@code types} (primitive Hive types),
 * {@code bucket}, {@code min}/{@code max} write ids, optional {@code statement}, {@code ops}:
 * {@code ["insert", writeId, [values]]}, {@code ["delete", writeId, [writeId, bucketId, rowId]]},
 * {@code ["update", writeId, [writeId, bucketId, rowId], [values]]}, and {@code flush}: one of
 * {@code "close"} (the default), {@code "each"} (flush whenever the write id changes, as a transaction batch
 * does per commit, then close), {@code "open"} (flush after the last op and leave the updater open under the
 * name {@code handle}, its side file in place: a later request with that handle writes on into the same files,
 * as a transaction batch's next transaction does, until one closes it or {@code {"op": "write", "close":
 * handle}}).
 */
final class AcidWriter {
  private static final String ROW_ID_TYPE = "struct<writeid:bigint,bucketid:int,rowid:bigint>";
  private static final Map<String, RecordUpdater> OPEN = new HashMap<>();

  private AcidWriter() {}

  static void write(JsonNode request) throws Exception {
    if (request.hasNonNull("close")) {
      RecordUpdater open = OPEN.remove(request.get("close").asText());
      if (open == null) {
        throw new IllegalArgumentException("no open updater " + request.get("close"));
      }
      open.close(false);
      return;
    }
    List<String> columns = AcidReader.strings(request.get("columns"));
    List<String> types = AcidReader.strings(request.get("types"));
    List<String> eventColumns = new ArrayList<>(columns);
    eventColumns.add(0, "row__id");
    List<String> eventTypes = new ArrayList<>(types);
    eventTypes.add(0, ROW_ID_TYPE);
    TypeInfo eventType =
        TypeInfoUtils.getTypeInfoFromTypeString(AcidReader.structType(eventColumns, eventTypes));
    ObjectInspector inspector = TypeInfoUtils.getStandardJavaObjectInspectorFromTypeInfo(eventType);
    List<PrimitiveTypeInfo> primitives = new ArrayList<>();
    for (String type : types) {
      primitives.add((PrimitiveTypeInfo) TypeInfoUtils.getTypeInfoFromTypeString(type));
    }

    String handle = request.path("handle").asText(null);
    RecordUpdater updater = handle == null ? null : OPEN.remove(handle);
    if (updater == null) {
      updater = create(request, inspector);
    }
    String flush = request.path("flush").asText("close");
    Long lastWriteId = null;
    for (JsonNode op : request.get("ops")) {
      String kind = op.get(0).asText();
      long writeId = op.get(1).asLong();
      if ("each".equals(flush) && lastWriteId != null && writeId != lastWriteId) {
        updater.flush();
      }
      lastWriteId = writeId;
      switch (kind) {
        case "insert":
          updater.insert(writeId, event(null, op.get(2), primitives));
          break;
        case "delete":
          updater.delete(writeId, event(op.get(2), null, primitives));
          break;
        case "update":
          updater.update(writeId, event(op.get(2), op.get(3), primitives));
          break;
        default:
          throw new IllegalArgumentException("unknown updater op '" + kind + "'");
      }
    }
    if ("open".equals(flush)) {
      updater.flush();
      OPEN.put(handle, updater);
    } else {
      updater.close(false);
    }
  }

  private static RecordUpdater create(JsonNode request, ObjectInspector inspector) throws Exception {
    Configuration conf = new Configuration();
    HadoopAccess.configure(conf, request);
    Path dir = new Path(request.get("dir").asText());
    Properties tableProperties = new Properties();
    tableProperties.setProperty("transactional_properties", "default");
    FileSystem fs;
    if (dir.toUri().getScheme() == null || "file".equals(dir.toUri().getScheme())) {
      fs = new RawLocalFs();
      fs.initialize(java.net.URI.create("file:///"), conf);
    } else { // HDFS or S3 (s3a://): the store's own Hadoop client, HDFS's hflush and all
      fs = dir.getFileSystem(conf);
    }
    AcidOutputFormat.Options options =
        new AcidOutputFormat.Options(conf)
            .inspector(inspector)
            .filesystem(fs)
            .bucket(request.get("bucket").asInt())
            .minimumWriteId(request.get("min").asLong())
            .maximumWriteId(request.get("max").asLong())
            .recordIdColumn(0)
            .tableProperties(tableProperties)
            .finalDestination(dir);
    if (request.hasNonNull("statement")) {
      options = options.statementId(request.get("statement").asInt());
    }
    return new OrcOutputFormat().getRecordUpdater(dir, options);
  }

  /** {@code [ROW__ID, col1, col2, ...]} as standard Java objects; ROW__ID null for inserts, columns for deletes. */
  private static List<Object> event(JsonNode rowId, JsonNode values, List<PrimitiveTypeInfo> types) {
    List<Object> event = new ArrayList<>();
    event.add(
        rowId == null
            ? null
            : List.of(rowId.get(0).asLong(), rowId.get(1).asInt(), rowId.get(2).asLong()));
    for (int i = 0; i < types.size(); i++) {
      event.add(values == null ? null : value(values.get(i), types.get(i)));
    }
    return event;
  }

  private static Object value(JsonNode value, PrimitiveTypeInfo type) {
    if (value == null || value.isNull()) {
      return null;
    }
    switch (type.getPrimitiveCategory()) {
      case BOOLEAN:
        return value.asBoolean();
      case BYTE:
        return (byte) value.asInt();
      case SHORT:
        return (short) value.asInt();
      case INT:
        return value.asInt();
      case LONG:
        return value.asLong();
      case FLOAT:
        return (float) value.asDouble();
      case DOUBLE:
        return value.asDouble();
      case STRING:
        return value.asText();
      case TIMESTAMP:
        return org.apache.hadoop.hive.common.type.Timestamp.valueOf(value.asText());
      default:
        throw new IllegalArgumentException("the writer takes primitive columns only, not " + type);
    }
  }
}

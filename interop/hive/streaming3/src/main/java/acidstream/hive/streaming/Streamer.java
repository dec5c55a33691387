package acidstream.hive.streaming;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hive.streaming.AbstractRecordWriter;
import org.apache.hive.streaming.HiveStreamingConnection;
import org.apache.hive.streaming.StrictDelimitedInputWriter;
import org.apache.hive.streaming.StrictJsonWriter;

/**
 * Hive's streaming client as a long-running subprocess, one JSON request a line on stdin, one answer a line on
 * stdout ({@code {"ok": true}} or {@code {"ok": false, "error": "..."}}), one connection at a time:
 *
 * <ul>
 *   <li>{@code connect}: {@code uri} (the metastore), {@code db}, {@code table}, {@code static} (partition
 *       values, or null for dynamic partitioning: the records end with them), {@code batch} (transactions per
 *       batch), {@code writer} ({@code "delimited"}, comma-separated, or {@code "json"}).
 *   <li>{@code begin}, {@code write} ({@code records}: strings), {@code commit}, {@code abort}, {@code close}.
 * </ul>
 */
public final class Streamer {
  private static HiveStreamingConnection connection;

  private Streamer() {}

  /** The local file system without checksums: no {@code .crc} files, and hflush reaches the disk. */
  public static final class RawLocalFs extends RawLocalFileSystem {
    @Override
    public String getScheme() {
      return "file";
    }

    @Override
    public URI getUri() {
      return URI.create("file:///");
    }
  }

  public static void main(String[] args) throws Exception {
    PrintStream protocol = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      ObjectNode answer = json.createObjectNode();
      try {
        handle(json.readTree(line));
        answer.put("ok", true);
      } catch (Throwable e) {
        StringWriter trace = new StringWriter();
        e.printStackTrace(new PrintWriter(trace));
        answer.put("ok", false);
        answer.put("error", trace.toString());
      }
      protocol.println(json.writeValueAsString(answer));
    }
  }

  private static void handle(JsonNode request) throws Exception {
    String op = request.path("op").asText();
    switch (op) {
      case "connect":
        connection = connect(request);
        break;
      case "begin":
        connection.beginTransaction();
        break;
      case "write":
        for (JsonNode record : request.get("records")) {
          connection.write(record.asText().getBytes(StandardCharsets.UTF_8));
        }
        break;
      case "commit":
        connection.commitTransaction();
        break;
      case "abort":
        connection.abortTransaction();
        break;
      case "close":
        connection.close();
        connection = null;
        break;
      default:
        throw new IllegalArgumentException("unknown op '" + op + "'");
    }
  }

  private static HiveStreamingConnection connect(JsonNode request) throws Exception {
    HiveConf conf = new HiveConf();
    conf.set("hive.metastore.uris", request.get("uri").asText());
    conf.set("fs.file.impl", RawLocalFs.class.getName());
    conf.setBoolean("fs.file.impl.disable.cache", true);
    AbstractRecordWriter writer =
        "json".equals(request.get("writer").asText())
            ? StrictJsonWriter.newBuilder().build()
            : StrictDelimitedInputWriter.newBuilder().withFieldDelimiter(',').build();
    HiveStreamingConnection.Builder builder =
        HiveStreamingConnection.newBuilder()
            .withDatabase(request.get("db").asText())
            .withTable(request.get("table").asText())
            .withAgentInfo("acidstream-tests")
            .withTransactionBatchSize(request.get("batch").asInt())
            .withRecordWriter(writer)
            .withHiveConf(conf);
    if (request.hasNonNull("static")) {
      List<String> values = new ArrayList<>();
      request.get("static").forEach(v -> values.add(v.asText()));
      builder = builder.withStaticPartitionValues(values);
    }
    return builder.connect();
  }
}

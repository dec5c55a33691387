package acidstream.hive;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;

/**
 * Hive 4 as a long-running subprocess: one JSON request a line on stdin, one JSON answer a line on stdout.
 * Everything else Hive prints goes to stderr, so the protocol stream stays clean.
 *
 * <p>Requests name an {@code op}: {@code read} (see {@link AcidReader}), {@code select} (see {@link
 * AcidSelection}), {@code write} (see {@link AcidWriter}), {@code metastore} (see {@link Metastore}) or
 * {@code ping}. A read, a selection or a write may name Hadoop settings and a Kerberos login (see {@link
 * HadoopAccess}). Answers are {@code {"ok": true, ...}} or {@code {"ok": false, "error": "..."}}.
 */
public final class Referee {
  private Referee() {}

  public static void main(String[] args) throws Exception {
    PrintStream protocol = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      ObjectNode answer;
      try {
        answer = handle(json, json.readTree(line));
        answer.put("ok", true);
      } catch (Throwable e) {
        StringWriter trace = new StringWriter();
        e.printStackTrace(new PrintWriter(trace));
        answer = json.createObjectNode();
        answer.put("ok", false);
        answer.put("error", trace.toString());
      }
      protocol.println(json.writeValueAsString(answer));
    }
  }

  private static ObjectNode handle(ObjectMapper json, JsonNode request) throws Exception {
    String op = request.path("op").asText();
    ObjectNode answer = json.createObjectNode();
    switch (op) {
      case "ping":
        break;
      case "read":
        ArrayNode rows = answer.putArray("rows");
        ArrayNode splits = answer.putArray("splits");
        HadoopAccess.run(
            request,
            () -> {
              AcidReader.read(request, rows, splits);
              return null;
            });
        break;
      case "select":
        HadoopAccess.run(
            request,
            () -> {
              AcidSelection.select(request, answer);
              return null;
            });
        break;
      case "write":
        HadoopAccess.run(
            request,
            () -> {
              AcidWriter.write(request);
              return null;
            });
        break;
      case "metastore":
        Metastore.call(request, answer);
        break;
      default:
        throw new IllegalArgumentException("unknown op '" + op + "'");
    }
    return answer;
  }
}

package acidstream.hive;

import com.fasterxml.jackson.databind.JsonNode;

/** Placeholder until Hive's record updater is wired. */
final class AcidWriter {
  private AcidWriter() {}

  static void write(JsonNode request) {
    throw new UnsupportedOperationException("write");
  }
}

import acidstream.hive.streaming.Streamer;
import com.sun.management.OperatingSystemMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hive.streaming.HiveStreamingConnection;
import org.apache.hive.streaming.StrictDelimitedInputWriter;

/**
 * Hive's streaming client into dynamic partitions, for {@code bench/bench_streaming_partitions.py --hive}:
 * records {@code i,message number %08d,Asia,country%03d} (country takes P values) one at a time through
 * {@code HiveStreamingConnection.write}, one connection, batches of one transaction. First {@code warmup}
 * untimed transactions into the same table (the partitions' creation, the JIT's warm-up), then {@code txns}
 * timed ones. Compiled by the benchmark against Hive's streaming client jars. Prints one JSON line.
 *
 * <p>Arguments: uri db table records txns partitions warmup.
 */
public final class HivePartitionsBench {
  private HivePartitionsBench() {}

  public static void main(String[] args) throws Exception {
    int records = Integer.parseInt(args[3]);
    int txns = Integer.parseInt(args[4]);
    int partitions = Integer.parseInt(args[5]);
    int warmup = Integer.parseInt(args[6]);
    int per = records / txns;
    byte[][] data = new byte[per * txns][];
    for (int i = 0; i < data.length; i++) {
      String record = String.format("%d,message number %08d,Asia,country%03d", i, i, i % partitions);
      data[i] = record.getBytes(StandardCharsets.UTF_8);
    }
    HiveConf conf = new HiveConf();
    conf.set("hive.metastore.uris", args[0]);
    conf.set("fs.file.impl", Streamer.RawLocalFs.class.getName());
    conf.setBoolean("fs.file.impl.disable.cache", true);
    HiveStreamingConnection conn =
        HiveStreamingConnection.newBuilder()
            .withDatabase(args[1])
            .withTable(args[2])
            .withAgentInfo("acidstream-bench")
            .withTransactionBatchSize(1)
            .withRecordWriter(StrictDelimitedInputWriter.newBuilder().withFieldDelimiter(',').build())
            .withHiveConf(conf)
            .connect();
    for (int t = 0; t < warmup; t++) {
      txn(conn, data, t % txns, per);
    }
    OperatingSystemMXBean os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    long cpu0 = os.getProcessCpuTime();
    long start = System.nanoTime();
    for (int t = 0; t < txns; t++) {
      txn(conn, data, t, per);
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    double cpu = (os.getProcessCpuTime() - cpu0) / 1e9;
    conn.close();
    System.out.printf(
        "{\"records_per_s\": %f, \"ms_per_txn\": %f, \"cpu_s\": %f, \"wall_s\": %f}%n",
        per * (double) txns / seconds, seconds / txns * 1000, cpu, seconds);
  }

  private static void txn(HiveStreamingConnection conn, byte[][] data, int t, int per) throws Exception {
    conn.beginTransaction();
    for (int i = t * per; i < (t + 1) * per; i++) {
      conn.write(data[i]);
    }
    conn.commitTransaction();
  }
}

package acidstream.hive.streaming;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.management.OperatingSystemMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hive.streaming.HiveStreamingConnection;
import org.apache.hive.streaming.StrictDelimitedInputWriter;

/**
 * Hive's streaming client timing itself, for {@code bench/bench_hive_streaming.py}: the same delimited records
 * ({@code i,message number %08d}) into the static partition (Asia, India) of two tables of one metastore, first
 * {@code warmupTxns} untimed transactions into the warm-up table (the JIT compiles the hot paths), then
 * {@code txns} timed ones. Prints one JSON line: seconds, records/s, commit latencies, the process's CPU seconds
 * in the timed part and in all, and the metastore process's CPU seconds in the timed part.
 *
 * <p>Arguments: uri db table warmupTable records txns batch warmupTxns metastorePid clockTicksPerSecond.
 */
public final class StreamingBench {
  private StreamingBench() {}

  public static void main(String[] args) throws Exception {
    String uri = args[0];
    String db = args[1];
    int records = Integer.parseInt(args[4]);
    int txns = Integer.parseInt(args[5]);
    int batch = Integer.parseInt(args[6]);
    int warmupTxns = Integer.parseInt(args[7]);
    Path metastoreStat = Path.of("/proc", args[8], "stat");
    double ticks = Double.parseDouble(args[9]);
    int per = records / txns;
    byte[][] data = new byte[per * txns][];
    for (int i = 0; i < data.length; i++) {
      data[i] = String.format("%d,message number %08d", i, i).getBytes(StandardCharsets.UTF_8);
    }
    OperatingSystemMXBean os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    long warm0 = System.nanoTime();
    HiveStreamingConnection warm = connect(uri, db, args[3], batch);
    run(warm, data, Math.min(warmupTxns, txns), per);
    warm.close();
    double firstSeconds = (System.nanoTime() - warm0) / 1e9;

    HiveStreamingConnection conn = connect(uri, db, args[2], batch);
    double metastoreCpu0 = cpuSeconds(metastoreStat, ticks);
    long cpu0 = os.getProcessCpuTime();
    long start = System.nanoTime();
    double[] commits = run(conn, data, txns, per);
    conn.close();
    double seconds = (System.nanoTime() - start) / 1e9;
    long cpu1 = os.getProcessCpuTime();
    double metastoreCpu = cpuSeconds(metastoreStat, ticks) - metastoreCpu0;

    Arrays.sort(commits);
    ObjectNode out = new ObjectMapper().createObjectNode();
    out.put("seconds", seconds);
    out.put("records_per_s", per * (double) txns / seconds);
    out.put("warmup_s", firstSeconds);
    out.put("commit_p50_ms", percentile(commits, 50) * 1000);
    out.put("commit_p95_ms", percentile(commits, 95) * 1000);
    out.put("cpu_s", (cpu1 - cpu0) / 1e9);
    out.put("process_cpu_s", cpu1 / 1e9);
    out.put("metastore_cpu_s", metastoreCpu);
    System.out.println(new ObjectMapper().writeValueAsString(out));
  }

  private static HiveStreamingConnection connect(String uri, String db, String table, int batch)
      throws Exception {
    HiveConf conf = new HiveConf();
    conf.set("hive.metastore.uris", uri);
    conf.set("fs.file.impl", Streamer.RawLocalFs.class.getName());
    conf.setBoolean("fs.file.impl.disable.cache", true);
    return HiveStreamingConnection.newBuilder()
        .withDatabase(db)
        .withTable(table)
        .withStaticPartitionValues(List.of("Asia", "India"))
        .withAgentInfo("acidstream-bench")
        .withTransactionBatchSize(batch)
        .withRecordWriter(StrictDelimitedInputWriter.newBuilder().withFieldDelimiter(',').build())
        .withHiveConf(conf)
        .connect();
  }

  /** {@code txns} transactions of {@code per} records each; each commit's seconds. */
  private static double[] run(HiveStreamingConnection conn, byte[][] data, int txns, int per)
      throws Exception {
    double[] commits = new double[txns];
    for (int t = 0; t < txns; t++) {
      conn.beginTransaction();
      for (int i = t * per; i < (t + 1) * per; i++) {
        conn.write(data[i]);
      }
      long c0 = System.nanoTime();
      conn.commitTransaction();
      commits[t] = (System.nanoTime() - c0) / 1e9;
    }
    return commits;
  }

  /** numpy's default (linear) percentile of sorted values. */
  private static double percentile(double[] sorted, double q) {
    double at = (sorted.length - 1) * q / 100;
    int lo = (int) Math.floor(at);
    int hi = Math.min(lo + 1, sorted.length - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
  }

  /** A process's user plus system CPU seconds, from {@code /proc/PID/stat}. */
  private static double cpuSeconds(Path stat, double ticks) throws Exception {
    String text = Files.readString(stat);
    String[] fields = text.substring(text.lastIndexOf(')') + 2).split(" ");
    return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) / ticks;
  }
}

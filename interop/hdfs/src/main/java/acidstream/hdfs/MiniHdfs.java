package acidstream.hdfs;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * One NameNode and one DataNode on loopback, WebHDFS on, for tests: {@code MiniHdfs DIR} keeps the cluster's
 * storage under DIR and writes {@code DIR/ports} ("namenode webhdfs control") once the cluster takes writes.
 *
 * <p>{@code MiniHdfs DIR --kerberos PRINCIPAL KEYTAB} secures it: Kerberos for RPC (the NameNode and the
 * DataNode both log in as PRINCIPAL, as Hadoop's own secure tests do: one JVM has one login user), SPNEGO for
 * WebHDFS with every HTTP/* principal in KEYTAB, block access tokens, delegation tokens. The DataNode keeps its
 * non-privileged ports ({@code ignore.secure.ports.for.testing}: no root, no jsvc, no SASL data transfer).
 *
 * <p>The control port takes one line per connection and answers one line: {@code stop-datanode} and
 * {@code restart-datanode} (what a test of a lost DataNode needs), {@code shutdown}.
 */
public final class MiniHdfs {
  private MiniHdfs() {}

  private static void secure(Configuration conf, String principal, String keytab) {
    conf.set("hadoop.security.authentication", "kerberos");
    conf.set("dfs.namenode.kerberos.principal", principal);
    conf.set("dfs.namenode.keytab.file", keytab);
    conf.set("dfs.datanode.kerberos.principal", principal);
    conf.set("dfs.datanode.keytab.file", keytab);
    // Hadoop 3.3+ secures WebHDFS with the HTTP servers' filter (hadoop.http.authentication.*), not
    // dfs.web.authentication.*; "*": every HTTP/* principal of the keytab, whatever name a client used
    conf.set("hadoop.http.filter.initializers", "org.apache.hadoop.hdfs.web.AuthFilterInitializer");
    conf.set("hadoop.http.authentication.type", "kerberos");
    conf.set("hadoop.http.authentication.simple.anonymous.allowed", "false");
    conf.set("hadoop.http.authentication.kerberos.principal", "*");
    conf.set("hadoop.http.authentication.kerberos.keytab", keytab);
    // the signed cookie that spares a client SPNEGO on its next requests lasts 3 s, not 10 h: tests see a
    // ticket's expiry mid-batch
    conf.set("hadoop.http.authentication.token.validity", "3");
    conf.setBoolean("dfs.block.access.token.enable", true);
    conf.setBoolean("ignore.secure.ports.for.testing", true);
    conf.set("dfs.data.transfer.protection", "authentication");
    UserGroupInformation.setConfiguration(conf);
  }

  public static void main(String[] args) throws Exception {
    File dir = new File(args[0]).getAbsoluteFile();
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(dir, "data").getPath());
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.setInt("dfs.replication", 1);
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.namenode.http-bind-host", "127.0.0.1");
    // a lost DataNode is noticed in seconds, not the default ten minutes
    conf.setInt("dfs.heartbeat.interval", 1);
    conf.setInt("dfs.namenode.heartbeat.recheck-interval", 2000);
    // a WebHDFS append ends with the DataNode's client completing the file, which it asks again after a
    // pause until the NameNode has the block: 400 ms at first by default, once per flush
    conf.setInt("dfs.client.block.write.locateFollowingBlock.initial.delay.ms", 10);
    // one DataNode: a pipeline cannot swap a failed node for another, so do not try
    conf.set("dfs.client.block.write.replace-datanode-on-failure.enable", "false");
    if (args.length == 4 && args[1].equals("--kerberos")) {
      secure(conf, args[2], args[3]);
    }
    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf).numDataNodes(1).format(true).build();
    cluster.waitActive();
    MiniDFSCluster.DataNodeProperties[] stopped = new MiniDFSCluster.DataNodeProperties[1];
    try (ServerSocket control = new ServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
      String ports = cluster.getNameNodePort() + " "
          + cluster.getNameNode().getHttpAddress().getPort() + " " + control.getLocalPort() + "\n";
      File tmp = new File(dir, "ports.tmp");
      Files.writeString(tmp.toPath(), ports, StandardCharsets.UTF_8);
      Files.move(tmp.toPath(), new File(dir, "ports").toPath(), StandardCopyOption.ATOMIC_MOVE);
      while (true) {
        try (Socket s = control.accept();
            BufferedReader in = new BufferedReader(
                new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
            PrintWriter out = new PrintWriter(s.getOutputStream(), true, StandardCharsets.UTF_8)) {
          String command = String.valueOf(in.readLine()).trim();
          try {
            switch (command) {
              case "stop-datanode" -> {
                if (stopped[0] == null) {
                  stopped[0] = cluster.stopDataNode(0);
                }
                out.println("ok");
              }
              case "restart-datanode" -> {
                if (stopped[0] != null) {
                  cluster.restartDataNode(stopped[0], true);
                  stopped[0] = null;
                }
                cluster.waitActive();
                out.println("ok");
              }
              case "shutdown" -> {
                out.println("ok");
                cluster.shutdown();
                return;
              }
              default -> out.println("error unknown command: " + command);
            }
          } catch (Exception e) {
            out.println("error " + e);
          }
        }
      }
    } finally {
      cluster.shutdown();
    }
  }
}

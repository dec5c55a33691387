package acidstream.hive;

import com.fasterxml.jackson.databind.JsonNode;
import java.security.PrivilegedExceptionAction;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * How a request reaches files beyond the local disk, as a Hive job on a cluster would: {@code conf}, Hadoop
 * settings set on the job's configuration (an HDFS cluster's client configuration: its namenode's principal,
 * data transfer protection...; an S3 store's {@code fs.s3a.*} endpoint and keys, never logged), and {@code
 * kerberos}, {@code {"principal", "keytab", "krb5conf"}}: the request runs as that principal, logged in from
 * the keytab ({@code UserGroupInformation}), on a kerberized cluster.
 *
 * <p>Hadoop's security switch is process-wide, and the referee serves every test of a session: it is on for a
 * Kerberos request only, off again after it, so that other requests read as before.
 */
final class HadoopAccess {
  private static final Map<String, UserGroupInformation> LOGINS = new HashMap<>();

  private HadoopAccess() {}

  static void configure(Configuration conf, JsonNode request) {
    JsonNode settings = request.get("conf");
    if (settings != null && !settings.isNull()) {
      settings.fields().forEachRemaining(e -> conf.set(e.getKey(), e.getValue().asText()));
    }
  }

  static <T> T run(JsonNode request, PrivilegedExceptionAction<T> action) throws Exception {
    JsonNode kerberos = request.get("kerberos");
    if (kerberos == null || kerberos.isNull()) {
      return action.run();
    }
    // Java's Kerberos reads its configuration once, on first use: one KDC per referee
    String krb5 = kerberos.get("krb5conf").asText();
    String current = System.getProperty("java.security.krb5.conf");
    if (current == null) {
      System.setProperty("java.security.krb5.conf", krb5);
    } else if (!current.equals(krb5)) {
      throw new IllegalArgumentException("the referee's Kerberos configuration is " + current + ", not " + krb5);
    }
    Configuration secure = new Configuration();
    secure.set("hadoop.security.authentication", "kerberos");
    UserGroupInformation.setConfiguration(secure);
    try {
      String principal = kerberos.get("principal").asText();
      String keytab = kerberos.get("keytab").asText();
      String key = principal + "\0" + keytab;
      UserGroupInformation user = LOGINS.get(key);
      if (user == null) {
        user = UserGroupInformation.loginUserFromKeytabAndReturnUGI(principal, keytab);
        LOGINS.put(key, user);
      } else {
        user.checkTGTAndReloginFromKeytab();
      }
      return user.doAs(action);
    } finally {
      UserGroupInformation.setConfiguration(new Configuration());
    }
  }
}

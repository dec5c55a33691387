import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HexFormat;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.PasswordCallback;
import javax.security.sasl.AuthorizeCallback;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslServer;

/**
 * The JDK's own DIGEST-MD5 server, set up as a Hive Metastore sets it up for delegation tokens (no protocol, the
 * server name "default", every cipher offered), for tests/metastore/test_hive_digest_layers.py. Arguments: user
 * and password. Sessions one after another, one line each way on stdin and stdout: the QOP in; the challenge out
 * (hex), the client's response in, the final answer (rspauth) out; then each line in is a message the client
 * wrapped, which goes back reversed, wrapped by the server, until an empty line ends the session.
 */
public class DigestMd5Server {
    public static void main(String[] args) throws Exception {
        char[] password = args[1].toCharArray();
        CallbackHandler handler = callbacks -> {
            for (Callback callback : callbacks) {
                if (callback instanceof PasswordCallback) {
                    ((PasswordCallback) callback).setPassword(password);
                } else if (callback instanceof RealmCallback) {
                    RealmCallback realm = (RealmCallback) callback;
                    realm.setText(realm.getDefaultText());
                } else if (callback instanceof AuthorizeCallback) {
                    ((AuthorizeCallback) callback).setAuthorized(true);
                }
            }
        };
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String qop = in.readLine(); qop != null && !qop.isEmpty(); qop = in.readLine()) {
            Map<String, String> props = Map.of(Sasl.QOP, qop);
            SaslServer server = Sasl.createSaslServer("DIGEST-MD5", null, "default", props, handler);
            System.out.println(hex.formatHex(server.evaluateResponse(new byte[0])));
            System.out.flush();
            System.out.println(hex.formatHex(server.evaluateResponse(hex.parseHex(in.readLine()))));
            System.out.flush();
            for (String line = in.readLine(); line != null && !line.isEmpty(); line = in.readLine()) {
                byte[] wrapped = hex.parseHex(line);
                byte[] message = server.unwrap(wrapped, 0, wrapped.length);
                byte[] reversed = new byte[message.length];
                for (int i = 0; i < message.length; i++) {
                    reversed[i] = message[message.length - 1 - i];
                }
                System.out.println(hex.formatHex(server.wrap(reversed, 0, reversed.length)));
                System.out.flush();
            }
        }
    }
}

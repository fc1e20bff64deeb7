// A Java client as Heritrix-era crawlers are: java.net.http.HttpClient through a proxy port,
// trusting lathe's CA from a truststore given with -Djavax.net.ssl.trustStore. Prints
// "<status> <bytes> <url>" per URL.
import java.net.InetSocketAddress;
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class Fetch {
  public static void main(String[] args) throws Exception {
    HttpClient client = HttpClient.newBuilder()
        .proxy(ProxySelector.of(new InetSocketAddress(args[0], Integer.parseInt(args[1]))))
        .connectTimeout(Duration.ofSeconds(10))
        .version(HttpClient.Version.HTTP_1_1)
        .build();
    for (int i = 2; i < args.length; i++) {
      HttpRequest req = HttpRequest.newBuilder(URI.create(args[i])).timeout(Duration.ofSeconds(20)).build();
      HttpResponse<byte[]> res = client.send(req, HttpResponse.BodyHandlers.ofByteArray());
      System.out.println(res.statusCode() + " " + res.body().length + " " + args[i]);
    }
  }
}

package acidstream.hive;

import java.net.URI;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * The local file system without checksums, as Hive's own ACID tests use: no {@code .crc} files beside ours, and
 * {@code hflush} reaches the disk, so the data and side files of a writer left open read as on HDFS.
 */
public final class RawLocalFs extends RawLocalFileSystem {
  @Override
  public String getScheme() {
    return "file";
  }

  @Override
  public URI getUri() {
    return URI.create("file:///");
  }
}

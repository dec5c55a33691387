package acidstream.hive;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.hadoop.hive.metastore.api.Database;
import org.apache.hadoop.hive.metastore.api.FieldSchema;
import org.apache.hadoop.hive.metastore.api.NoSuchObjectException;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.SerDeInfo;
import org.apache.hadoop.hive.metastore.api.StorageDescriptor;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.api.TxnToWriteId;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.txn.TxnCommonUtils;

/**
 * Hive's metastore client against a standalone Hive Metastore: what a Hive writer asks of it, one request at a
 * time. Request {@code uri} plus {@code call}:
 *
 * <ul>
 *   <li>{@code create_table}: {@code db}, {@code table}, {@code columns}, {@code types}, {@code partition_keys},
 *       {@code buckets} (0: unbucketed), {@code bucket_columns}; answers {@code location}.
 *   <li>{@code add_partition}: {@code db}, {@code table}, {@code values}; answers {@code location}.
 *   <li>{@code partitions}: {@code db}, {@code table}; answers {@code partitions} ({@code values},
 *       {@code location} each).
 *   <li>{@code open_txns}: {@code count}; answers {@code txns}. {@code allocate_write_ids}: {@code db},
 *       {@code table}, {@code txns}; answers {@code write_ids}. {@code commit_txn}/{@code abort_txn}: {@code txn}.
 *   <li>{@code snapshot}: {@code db}, {@code table}, optional {@code txns}; answers {@code txns} ({@code
 *       ValidTxnList}: the one given, else the metastore's now) and {@code writeids} (the table's {@code
 *       ValidWriteIdList} at those txns), as a Hive query's compiler takes them.
 * </ul>
 */
final class Metastore {
  private static final Map<String, HiveMetaStoreClient> CLIENTS = new HashMap<>();

  private Metastore() {}

  static void call(JsonNode request, ObjectNode answer) throws Exception {
    HiveMetaStoreClient client = client(request.get("uri").asText());
    String db = request.path("db").asText();
    String table = request.path("table").asText();
    switch (request.get("call").asText()) {
      case "create_table":
        answer.put("location", createTable(client, request, db, table));
        break;
      case "add_partition":
        answer.put("location", addPartition(client, request, db, table));
        break;
      case "partitions":
        for (Partition p : client.listPartitions(db, table, (short) -1)) {
          ObjectNode out = answer.withArray("partitions").addObject();
          p.getValues().forEach(out.putArray("values")::add);
          out.put("location", p.getSd().getLocation());
        }
        break;
      case "open_txns":
        List<Long> txns = client.openTxns("acidstream", request.get("count").asInt()).getTxn_ids();
        txns.forEach(answer.putArray("txns")::add);
        break;
      case "allocate_write_ids":
        List<Long> ids = new ArrayList<>();
        request.get("txns").forEach(n -> ids.add(n.asLong()));
        for (TxnToWriteId t : client.allocateTableWriteIdsBatch(ids, db, table)) {
          answer.withArray("write_ids").add(t.getWriteId());
        }
        break;
      case "commit_txn":
        client.commitTxn(request.get("txn").asLong());
        break;
      case "abort_txn":
        client.rollbackTxn(request.get("txn").asLong());
        break;
      case "snapshot":
        // The metastore's snapshot now, or its table write ids at a given txn snapshot ("txns").
        String txnList =
            request.hasNonNull("txns") ? request.get("txns").asText() : client.getValidTxns().writeToString();
        String full = db + "." + table;
        answer.put("txns", txnList);
        answer.put(
            "writeids",
            TxnCommonUtils.createValidReaderWriteIdList(
                    client.getValidWriteIds(List.of(full), txnList).get(0))
                .writeToString());
        break;
      default:
        throw new IllegalArgumentException("unknown metastore call " + request.get("call"));
    }
  }

  private static HiveMetaStoreClient client(String uri) throws Exception {
    HiveMetaStoreClient client = CLIENTS.get(uri);
    if (client == null) {
      Configuration conf = MetastoreConf.newMetastoreConf();
      MetastoreConf.setVar(conf, MetastoreConf.ConfVars.THRIFT_URIS, uri);
      client = new HiveMetaStoreClient(conf);
      CLIENTS.put(uri, client);
    }
    return client;
  }

  private static String createTable(HiveMetaStoreClient client, JsonNode request, String db, String name)
      throws Exception {
    try {
      client.getDatabase(db);
    } catch (NoSuchObjectException e) {
      client.createDatabase(new Database(db, "", null, new HashMap<>()));
    }
    StorageDescriptor sd = new StorageDescriptor();
    sd.setCols(fields(request.get("columns"), request.get("types")));
    sd.setInputFormat("org.apache.hadoop.hive.ql.io.orc.OrcInputFormat");
    sd.setOutputFormat("org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat");
    SerDeInfo serde = new SerDeInfo();
    serde.setSerializationLib("org.apache.hadoop.hive.ql.io.orc.OrcSerde");
    serde.setParameters(new HashMap<>());
    sd.setSerdeInfo(serde);
    sd.setNumBuckets(request.path("buckets").asInt(0) > 0 ? request.get("buckets").asInt() : -1);
    sd.setBucketCols(AcidReader.strings(request.path("bucket_columns")));
    sd.setSortCols(new ArrayList<>());
    sd.setParameters(new HashMap<>());
    Table table = new Table();
    table.setDbName(db);
    table.setTableName(name);
    table.setOwner("acidstream");
    table.setTableType("MANAGED_TABLE");
    table.setSd(sd);
    List<FieldSchema> keys = new ArrayList<>();
    for (JsonNode key : request.path("partition_keys")) {
      keys.add(new FieldSchema(key.asText(), "string", null));
    }
    table.setPartitionKeys(keys);
    Map<String, String> params = new HashMap<>();
    params.put("transactional", "true");
    params.put("transactional_properties", "default");
    table.setParameters(params);
    client.createTable(table);
    return client.getTable(db, name).getSd().getLocation();
  }

  private static String addPartition(HiveMetaStoreClient client, JsonNode request, String db, String table)
      throws Exception {
    Partition partition = client.appendPartition(db, table, AcidReader.strings(request.get("values")));
    return partition.getSd().getLocation();
  }

  private static List<FieldSchema> fields(JsonNode names, JsonNode types) {
    List<FieldSchema> out = new ArrayList<>();
    for (int i = 0; i < names.size(); i++) {
      out.add(new FieldSchema(names.get(i).asText(), types.get(i).asText(), null));
    }
    return out;
  }
}

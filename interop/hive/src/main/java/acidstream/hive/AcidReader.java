package acidstream.hive;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.common.ValidTxnList;
import org.apache.hadoop.hive.common.ValidWriteIdList;
import org.apache.hadoop.hive.common.type.DataTypePhysicalVariation;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.api.hive_metastoreConstants;
import org.apache.hadoop.hive.ql.exec.Utilities;
import org.apache.hadoop.hive.ql.exec.vector.ColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.LongColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.StructColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorExtractRow;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatchCtx;
import org.apache.hadoop.hive.ql.io.AcidInputFormat;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.hive.ql.io.IOConstants;
import org.apache.hadoop.hive.ql.io.RecordIdentifier;
import org.apache.hadoop.hive.ql.io.orc.OrcInputFormat;
import org.apache.hadoop.hive.ql.io.orc.OrcSplit;
import org.apache.hadoop.hive.ql.io.orc.OrcStruct;
import org.apache.hadoop.hive.ql.io.orc.VectorizedOrcAcidRowBatchReader;
import org.apache.hadoop.hive.ql.metadata.VirtualColumn;
import org.apache.hadoop.hive.ql.plan.MapWork;
import org.apache.hadoop.hive.serde.serdeConstants;
import org.apache.hadoop.hive.serde2.ColumnProjectionUtils;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorUtils;
import org.apache.hadoop.hive.serde2.objectinspector.StructField;
import org.apache.hadoop.hive.serde2.objectinspector.StructObjectInspector;
import org.apache.hadoop.hive.serde2.typeinfo.StructTypeInfo;
import org.apache.hadoop.hive.serde2.typeinfo.TypeInfo;
import org.apache.hadoop.hive.serde2.typeinfo.TypeInfoUtils;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.mapred.FileInputFormat;
import org.apache.hadoop.mapred.InputSplit;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.RecordReader;
import org.apache.hadoop.mapred.Reporter;

/**
 * Reads a full-ACID table or partition directory at a snapshot the way a Hive query's table scan does:
 * {@code OrcInputFormat} splits the directory chosen by {@code AcidUtils.getAcidState}, and each split's reader
 * ({@code OrcRawRecordMerger}) merges base, deltas and delete deltas by ROW__ID.
 *
 * <p>Request: {@code dir}, {@code columns} and {@code types} (the table's data columns, Hive type names),
 * {@code writeids} ({@code ValidWriteIdList} string), {@code txns} ({@code ValidTxnList} string), optional
 * {@code buckets} (bucket count of a bucketed table), optional {@code vectorized} (read through Hive's
 * vectorized ACID reader instead), optional {@code splits}: {@code "hybrid"} (the default: Hive's default
 * strategy for a one-task query, which lists files without reading them when there are several) or {@code
 * "etl"} (the strategy of large queries and Tez: every file's footer read at split generation, a split per
 * stripe). Each row answers {@code [writeid, bucketid, rowid, [values...]]}; {@code splits} answers the
 * splits read, {@code [file name, start, length]} each.
 */
final class AcidReader {
  private AcidReader() {}

  static void read(JsonNode request, ArrayNode rows, ArrayNode splitsOut) throws Exception {
    List<String> columns = strings(request.get("columns"));
    List<String> types = strings(request.get("types"));
    JobConf job = new JobConf();
    job.set("fs.file.impl", RawLocalFs.class.getName());
    job.setBoolean("fs.file.impl.disable.cache", true);
    HadoopAccess.configure(job, request);
    FileInputFormat.setInputPaths(job, new Path(request.get("dir").asText()));
    job.set(serdeConstants.LIST_COLUMNS, String.join(",", columns));
    job.set(serdeConstants.LIST_COLUMN_TYPES, String.join(",", types));
    job.set(IOConstants.SCHEMA_EVOLUTION_COLUMNS, String.join(",", columns));
    job.set(IOConstants.SCHEMA_EVOLUTION_COLUMNS_TYPES, String.join(":", types));
    ColumnProjectionUtils.setReadAllColumns(job);
    if (request.hasNonNull("buckets")) {
      job.set(hive_metastoreConstants.BUCKET_COUNT, request.get("buckets").asText());
    }
    job.setBoolean(hive_metastoreConstants.TABLE_IS_TRANSACTIONAL, true);
    AcidUtils.setAcidOperationalProperties(job, true, null);
    HiveConf.setBoolVar(job, HiveConf.ConfVars.HIVE_TRANSACTIONAL_TABLE_SCAN, true);
    job.set(ValidWriteIdList.VALID_WRITEIDS_KEY, request.get("writeids").asText());
    job.set(ValidTxnList.VALID_TXNS_KEY, request.get("txns").asText());
    // No footer cache across requests: a file rewritten in place is read afresh, as a new query's would be.
    HiveConf.setVar(job, HiveConf.ConfVars.HIVE_ORC_CACHE_STRIPE_DETAILS_MEMORY_SIZE, "0");
    String splits = request.path("splits").asText("hybrid");
    switch (splits) {
      case "hybrid":
        break;
      case "etl":
        // hive.exec.orc.split.strategy=ETL with a split size below any stripe's: one split per stripe, so
        // each reader of a base or insert delta works from the key index of its stripe alone.
        HiveConf.setVar(job, HiveConf.ConfVars.HIVE_ORC_SPLIT_STRATEGY, "ETL");
        job.setLong(org.apache.hadoop.mapreduce.lib.input.FileInputFormat.SPLIT_MAXSIZE, 1);
        job.setLong(org.apache.hadoop.mapreduce.lib.input.FileInputFormat.SPLIT_MINSIZE, 1);
        break;
      default:
        throw new IllegalArgumentException("unknown split strategy '" + splits + "'");
    }

    TypeInfo rowType = TypeInfoUtils.getTypeInfoFromTypeString(structType(columns, types));
    VectorizedRowBatchCtx context = null;
    if (request.path("vectorized").asBoolean(false)) {
      context = batchContext((StructTypeInfo) rowType);
      // As a vectorized query's plan: split generation then numbers original files' rows for ROW__ID.
      MapWork plan = new MapWork();
      plan.setVectorMode(true);
      plan.setVectorizedRowBatchCtx(context);
      HiveConf.setVar(job, HiveConf.ConfVars.PLAN, "//acidstream-referee");
      Utilities.setMapWork(job, plan);
    }
    OrcInputFormat format = new OrcInputFormat();
    for (InputSplit split : format.getSplits(job, 1)) {
      OrcSplit orc = (OrcSplit) split;
      splitsOut.addArray().add(orc.getPath().getName()).add(orc.getStart()).add(orc.getLength());
      if (context != null) {
        readVectorized(orc, job, context, rows);
      } else {
        readRows(format, split, job, rowType, rows);
      }
    }
  }

  /** The row-mode path: {@code OrcInputFormat.getRecordReader}, an {@code OrcRawRecordMerger} underneath. */
  private static void readRows(
      OrcInputFormat format, InputSplit split, JobConf job, TypeInfo rowType, ArrayNode rows)
      throws Exception {
    StructObjectInspector inspector = (StructObjectInspector) OrcStruct.createObjectInspector(rowType);
    List<? extends StructField> fields = inspector.getAllStructFieldRefs();
    RecordReader<NullWritable, OrcStruct> reader = format.getRecordReader(split, job, Reporter.NULL);
    @SuppressWarnings("unchecked")
    AcidInputFormat.AcidRecordReader<NullWritable, OrcStruct> acid =
        (AcidInputFormat.AcidRecordReader<NullWritable, OrcStruct>) reader;
    NullWritable key = reader.createKey();
    OrcStruct value = reader.createValue();
    try {
      while (reader.next(key, value)) {
        RecordIdentifier id = acid.getRecordIdentifier();
        ArrayNode values = addRow(rows, id.getWriteId(), id.getBucketProperty(), id.getRowId());
        for (StructField field : fields) {
          values.add(
              toJson(
                  ObjectInspectorUtils.copyToStandardJavaObject(
                      inspector.getStructFieldData(value, field), field.getFieldObjectInspector())));
        }
      }
    } finally {
      reader.close();
    }
  }

  /**
   * The vectorized path of a Hive query with vectorization on: {@code VectorizedOrcAcidRowBatchReader} with
   * ROW__ID projected (its delete-event registries, not the merger). Its constructor taking the batch context
   * is package-private (Hive builds the context from a query plan), hence the reflection.
   */
  private static void readVectorized(
      OrcSplit split, JobConf job, VectorizedRowBatchCtx context, ArrayNode rows) throws Exception {
    int data = context.getDataColumnCount();
    List<TypeInfo> dataTypes = Arrays.asList(context.getRowColumnTypeInfos()).subList(0, data);
    Constructor<VectorizedOrcAcidRowBatchReader> make =
        VectorizedOrcAcidRowBatchReader.class.getDeclaredConstructor(
            OrcSplit.class, JobConf.class, Reporter.class, VectorizedRowBatchCtx.class);
    make.setAccessible(true);
    VectorizedOrcAcidRowBatchReader reader = make.newInstance(split, job, Reporter.NULL, context);
    VectorExtractRow extract = new VectorExtractRow();
    extract.init(dataTypes.toArray(new TypeInfo[0]));
    List<ObjectInspector> inspectors = new ArrayList<>();
    for (TypeInfo type : dataTypes) {
      inspectors.add(TypeInfoUtils.getStandardWritableObjectInspectorFromTypeInfo(type));
    }
    VectorizedRowBatch batch = context.createVectorizedRowBatch();
    Object[] values = new Object[data];
    try {
      while (reader.next(NullWritable.get(), batch)) {
        StructColumnVector rowIds = (StructColumnVector) batch.cols[data];
        for (int j = 0; j < batch.size; j++) {
          int i = batch.selectedInUse ? batch.selected[j] : j;
          ArrayNode out =
              addRow(
                  rows,
                  element(rowIds.fields[0], i),
                  element(rowIds.fields[1], i),
                  element(rowIds.fields[2], i));
          extract.extractRow(batch, i, values);
          for (int c = 0; c < data; c++) {
            out.add(toJson(ObjectInspectorUtils.copyToStandardJavaObject(values[c], inspectors.get(c))));
          }
        }
      }
    } finally {
      reader.close();
    }
  }

  /** The batch layout of a scan of the data columns with ROW__ID projected after them. */
  private static VectorizedRowBatchCtx batchContext(StructTypeInfo rowType) {
    List<TypeInfo> dataTypes = rowType.getAllStructFieldTypeInfos();
    List<String> names = new ArrayList<>(rowType.getAllStructFieldNames());
    names.add(VirtualColumn.ROWID.getName());
    List<TypeInfo> all = new ArrayList<>(dataTypes);
    all.add(VirtualColumn.ROWID.getTypeInfo());
    DataTypePhysicalVariation[] variations = new DataTypePhysicalVariation[all.size()];
    Arrays.fill(variations, DataTypePhysicalVariation.NONE);
    int[] dataColumnNums = new int[dataTypes.size()];
    Arrays.setAll(dataColumnNums, i -> i);
    return new VectorizedRowBatchCtx(
        names.toArray(new String[0]),
        all.toArray(new TypeInfo[0]),
        variations,
        dataColumnNums,
        0,
        1,
        new VirtualColumn[] {VirtualColumn.ROWID},
        new String[0],
        new DataTypePhysicalVariation[0]);
  }

  private static long element(ColumnVector vector, int row) {
    return ((LongColumnVector) vector).vector[vector.isRepeating ? 0 : row];
  }

  private static ArrayNode addRow(ArrayNode rows, long writeId, long bucketId, long rowId) {
    ArrayNode row = rows.addArray();
    row.add(writeId).add(bucketId).add(rowId);
    return row.addArray();
  }

  static String structType(List<String> columns, List<String> types) {
    List<String> fields = new ArrayList<>();
    for (int i = 0; i < columns.size(); i++) {
      fields.add(columns.get(i) + ":" + types.get(i));
    }
    return "struct<" + String.join(",", fields) + ">";
  }

  static List<String> strings(JsonNode array) {
    List<String> out = new ArrayList<>();
    array.forEach(n -> out.add(n.asText()));
    return out;
  }

  /** Hive's standard Java objects as JSON: numbers and booleans as such, maps as [key, value] pairs, the rest as text. */
  static com.fasterxml.jackson.databind.JsonNode toJson(Object value) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    if (value == null) {
      return f.nullNode();
    } else if (value instanceof Boolean b) {
      return f.booleanNode(b);
    } else if (value instanceof Byte || value instanceof Short || value instanceof Integer || value instanceof Long) {
      return f.numberNode(((Number) value).longValue());
    } else if (value instanceof Float x) {
      return f.numberNode(x.doubleValue());
    } else if (value instanceof Double x) {
      return f.numberNode(x);
    } else if (value instanceof byte[] bytes) {
      return f.textNode(Base64.getEncoder().encodeToString(bytes));
    } else if (value instanceof List<?> list) {
      ArrayNode out = f.arrayNode();
      list.forEach(v -> out.add(toJson(v)));
      return out;
    } else if (value instanceof Map<?, ?> map) {
      ArrayNode out = f.arrayNode();
      map.forEach((k, v) -> out.addArray().add(toJson(k)).add(toJson(v)));
      return out;
    }
    return f.textNode(value.toString());
  }
}

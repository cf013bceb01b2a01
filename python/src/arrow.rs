//! Tables to Arrow: a [`ColumnTable`] becomes one Arrow record batch, handed to Python through
//! the Arrow PyCapsule interface (`__arrow_c_stream__`), which pyarrow, polars and pandas read
//! without a copy and without going through JSON.

use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, LargeStringArray, RecordBatch,
    RecordBatchIterator, RecordBatchOptions, UInt32Array, UInt64Array,
};
use arrow_schema::{ArrowError, Field, Schema};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use steplens_analysis::export::columns::{ColumnTable, Values};

/// One table as Arrow data; exported as a stream as many times as asked.
#[pyclass(frozen, module = "steplens._steplens")]
pub(crate) struct ArrowTable {
    name: &'static str,
    batch: RecordBatch,
}

impl ArrowTable {
    /// Converts a table, moving its columns into Arrow buffers.
    pub(crate) fn from_columns(table: ColumnTable<'_>) -> Result<Self, ArrowError> {
        let mut fields = Vec::with_capacity(table.columns.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(table.columns.len());
        for column in table.columns {
            let (array, nullable): (ArrayRef, bool) = match column.values {
                Values::U32(v) => (Arc::new(UInt32Array::from(v)), false),
                Values::OptU32(v) => (Arc::new(UInt32Array::from(v)), true),
                Values::U64(v) => (Arc::new(UInt64Array::from(v)), false),
                Values::I64(v) => (Arc::new(Int64Array::from(v)), false),
                Values::OptI64(v) => (Arc::new(Int64Array::from(v)), true),
                Values::F64(v) => (Arc::new(Float64Array::from(v)), false),
                Values::OptF64(v) => (Arc::new(Float64Array::from(v)), true),
                Values::OptBool(v) => (Arc::new(BooleanArray::from(v)), true),
                Values::Str(v) => (Arc::new(LargeStringArray::from_iter_values(v)), false),
                Values::OptStr(v) => (
                    Arc::new(v.iter().map(|s| s.as_deref()).collect::<LargeStringArray>()),
                    true,
                ),
            };
            fields.push(Field::new(column.name, array.data_type().clone(), nullable));
            arrays.push(array);
        }
        let schema = Arc::new(Schema::new(fields));
        let options = RecordBatchOptions::new().with_row_count(Some(table.rows));
        let batch = RecordBatch::try_new_with_options(schema, arrays, &options)?;
        Ok(Self {
            name: table.name,
            batch,
        })
    }
}

#[pymethods]
impl ArrowTable {
    /// The Arrow PyCapsule stream protocol. A requested schema is not honoured: the columns
    /// come as they are (consumers cast), which the protocol allows.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(vec![Ok(self.batch.clone())], self.batch.schema());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// Table name.
    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    /// Rows.
    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    /// Column names, in order.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }
}

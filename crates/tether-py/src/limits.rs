//! Resource limits from Python (`memory=`, `pids=`, `cpu=`) and the
//! library's report of how each was enforced, as Python objects.

use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use crate::error::IntoPy;

/// The limits of `memory` (an int of bytes or a size string such as
/// `"512M"`), `pids` (an int) and `cpu` (cores, int or float), checked.
/// A wrong type is a `TypeError`; a wrong value (0, negative, not a size,
/// fewer than 0.01 cores) a `ValueError`. `require`: the spawn fails
/// (`TetherError`) rather than run with a limit that is not enforced.
pub(crate) fn from_py(
    py: Python<'_>,
    memory: Option<&Bound<'_, PyAny>>,
    pids: Option<&Bound<'_, PyAny>>,
    cpu: Option<&Bound<'_, PyAny>>,
    require: bool,
) -> PyResult<tether::Limits> {
    let limits = tether::Limits {
        memory: memory.map(memory_bytes).transpose()?,
        pids: pids.map(|p| count("pids", p)).transpose()?,
        cpu: cpu.map(cores).transpose()?,
        require,
    };
    limits.validate().py_err(py)?;
    Ok(limits)
}

fn memory_bytes(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(text) = value.cast::<PyString>() {
        return tether::parse_size(&text.to_cow()?)
            .map_err(|e| PyValueError::new_err(format!("memory: {e}")));
    }
    if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
        return positive("memory", value, "bytes");
    }
    Err(PyTypeError::new_err(format!(
        "memory must be an int (bytes) or a size string such as '512M', not {}",
        type_name(value)
    )))
}

fn count(what: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
        return positive(what, value, "processes");
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be an int, not {}",
        type_name(value)
    )))
}

/// An int of at least 1 that fits 64 bits.
fn positive(what: &str, value: &Bound<'_, PyAny>, unit: &str) -> PyResult<u64> {
    match value.extract::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(PyValueError::new_err(format!(
            "{what} must be at least 1 ({unit}) and below 2**64, not {value}"
        ))),
    }
}

fn cores(value: &Bound<'_, PyAny>) -> PyResult<f64> {
    if (value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>())
        && !value.is_instance_of::<PyBool>()
    {
        return value.extract::<f64>();
    }
    Err(PyTypeError::new_err(format!(
        "cpu must be a number of cores (int or float), not {}",
        type_name(value)
    )))
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// One limit as applied: its value and how it is enforced.
#[pyclass(frozen, get_all, module = "tether._native")]
pub(crate) struct Limit {
    /// Bytes (memory), processes (pids) or cores (cpu).
    value: Py<PyAny>,
    /// `cgroup2`, `cgroup1`, `job`, `rlimit` or `none`.
    enforced: String,
    /// Why it is not enforced (with `none`), else `None`.
    reason: Option<String>,
}

impl Limit {
    fn new<'py, T>(py: Python<'py>, value: T, how: &tether::Enforcement) -> PyResult<Limit>
    where
        T: IntoPyObject<'py>,
    {
        Ok(Limit {
            value: value.into_py_any(py)?,
            enforced: how.name().to_owned(),
            reason: how.reason().map(str::to_owned),
        })
    }
}

#[pymethods]
impl Limit {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let value = self.value.bind(py).repr()?;
        Ok(match &self.reason {
            Some(reason) => format!("Limit({value}, {:?}, reason={reason:?})", self.enforced),
            None => format!("Limit({value}, {:?})", self.enforced),
        })
    }
}

/// The limits a session runs under, as applied: per limit asked for, its
/// value and enforcement; `None` for a limit not asked for.
#[pyclass(frozen, get_all, module = "tether._native")]
pub(crate) struct LimitReport {
    /// The memory limit in bytes.
    memory: Option<Py<Limit>>,
    /// The process-count limit.
    pids: Option<Py<Limit>>,
    /// The CPU limit in cores.
    cpu: Option<Py<Limit>>,
    /// The session's own cgroup v2 (Linux), when it has one.
    cgroup: Option<String>,
    /// What gave the limits beyond the owner's own cgroup (`systemd scope
    /// …`), when something did.
    via: Option<String>,
}

impl LimitReport {
    pub(crate) fn new(py: Python<'_>, report: &tether::LimitReport) -> PyResult<LimitReport> {
        let limit =
            |limit: Option<PyResult<Limit>>| limit.transpose()?.map(|l| Py::new(py, l)).transpose();
        Ok(LimitReport {
            memory: limit(report.memory.as_ref().map(|(b, h)| Limit::new(py, *b, h)))?,
            pids: limit(report.pids.as_ref().map(|(n, h)| Limit::new(py, *n, h)))?,
            cpu: limit(
                report
                    .cpu_millis
                    .as_ref()
                    .map(|(m, h)| Limit::new(py, *m as f64 / 1000.0, h)),
            )?,
            cgroup: report.cgroup.as_ref().map(|p| p.display().to_string()),
            via: report.via.clone(),
        })
    }
}

#[pymethods]
impl LimitReport {
    /// Whether any limit was asked for.
    fn __bool__(&self) -> bool {
        self.memory.is_some() || self.pids.is_some() || self.cpu.is_some()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let show = |limit: &Option<Py<Limit>>| -> PyResult<String> {
            match limit {
                Some(l) => l.get().__repr__(py),
                None => Ok("None".to_owned()),
            }
        };
        Ok(format!(
            "LimitReport(memory={}, pids={}, cpu={})",
            show(&self.memory)?,
            show(&self.pids)?,
            show(&self.cpu)?
        ))
    }
}

//! Windows-only abilities. The job-object backend brings them (attaching
//! the current process to a kill-on-close job); nothing is here yet.

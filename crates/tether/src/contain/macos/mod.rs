//! macOS: the keeper with process group + spawn tag containment (in progress).

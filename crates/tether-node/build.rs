fn main() {
    // Link flags Node addons need (macOS: `-undefined dynamic_lookup`, so
    // the napi_* symbols resolve against the node binary at load).
    napi_build::setup();
}

/* A shared library that exports no ncclNetPlugin_* table: what a plugin loader must reject cleanly. */
__attribute__((visibility("default"))) int weft_empty_net_plugin_marker(void) { return 42; }

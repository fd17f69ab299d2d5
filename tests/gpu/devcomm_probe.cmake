# Diagnostic: is the communicator's device state readable by a kernel? (docs/NOTES.md)
add_executable(weft_devcomm_probe ${CMAKE_CURRENT_LIST_DIR}/devcomm_probe.cu)
target_link_libraries(weft_devcomm_probe PRIVATE weft_internal)

/* libdsMLIRCAPI.so: MLIR's own C API (mlir-c/IR.h, Pass.h, RegisterEverything.h, ...), the
 * objects of Debian's libMLIRCAPI*.a archives over libMLIR.so (see CMakeLists.txt); this file
 * only gives the library a source. */

# The ds dialect's enums that are the runtime's ABI (slot roles, memory spaces, mesh axes,
# precisions, learning-rate schedules) are generated from dsrt.h's lists (DSRT_SLOT_ROLES,
# DSRT_SPACES, DSRT_MESH_AXES, DSRT_PRECISIONS, DSRT_LR_SCHEDULES: X(ENUMERATOR, name, ...,
# "description")), so
# that the IR and the runtime share one definition: a new entry there is a new case of the ODS
# enum here, with the same value, and every switch over either fails to build until it is
# handled (-Werror=switch).
#
# ds_runtime_enums_td(HEADER OUT): writes OUT (TableGen) from HEADER at configure time, again
# whenever HEADER changes.
function(ds_runtime_enums_td header out)
  file(READ ${header} text)
  set(td "// Generated from runtime/include/dsrt/dsrt.h by cmake/DSRuntimeEnums.cmake: do not\n")
  string(APPEND td "// edit; change the lists in dsrt.h.\n#ifndef DS_RUNTIME_ENUMS_TD\n")
  string(APPEND td "#define DS_RUNTIME_ENUMS_TD\n")
  # X(ENUM, name, ..., "description"): the name is the second field, the description the last.
  set(entry_re "X\\(([A-Z0-9_]+), ([a-z0-9_]+),[^\"]* \"([^\"]*)\"\\)")
  foreach(spec "DSRT_SLOT_ROLES|SlotRole|what a persistent slot holds"
               "DSRT_SPACES|MemorySpace|a memory space"
               "DSRT_MESH_AXES|MeshAxis|the role of a mesh axis"
               "DSRT_PRECISIONS|Precision|the precision a program trains in"
               "DSRT_LR_SCHEDULES|LRSchedule|a learning-rate schedule")
    string(REPLACE "|" ";" spec "${spec}")
    list(GET spec 0 macro)
    list(GET spec 1 enum)
    list(GET spec 2 summary)
    # The list: from its #define to the first line that does not continue it.
    string(REGEX MATCH "#define ${macro}\\(X\\)[^\n]*\\\\\n([^\n]*\\\\\n)*[^\n]*\n" block
           "${text}")
    string(REGEX MATCHALL "${entry_re}" entries "${block}")
    if(NOT entries)
      message(FATAL_ERROR "${header} has no ${macro}(X) list of X(ENUM, name, \"doc\") entries")
    endif()
    set(cases "")
    set(value 0)
    foreach(e IN LISTS entries)
      string(REGEX REPLACE "${entry_re}" "\\2" name "${e}")
      string(REGEX REPLACE "${entry_re}" "\\3" doc "${e}")
      list(APPEND cases "    // ${doc}\n    I32EnumAttrCase<\"${name}\", ${value}>")
      math(EXPR value "${value} + 1")
    endforeach()
    list(JOIN cases ",\n" joined)
    string(APPEND td "\n// ${macro}\ndef DS_${enum} : I32EnumAttr<\"${enum}\", \"${summary}\", [\n"
           "${joined}\n  ]> {\n  let cppNamespace = \"::mlir::ds\";\n  let genSpecializedAttr = 0;\n}\n")
  endforeach()
  string(APPEND td "\n#endif // DS_RUNTIME_ENUMS_TD\n")
  file(CONFIGURE OUTPUT ${out} CONTENT "${td}" @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${header})
endfunction()

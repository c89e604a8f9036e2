# hpref_library(<name> <sources>...): the library hpref_<name>, aliased and exported as
# hpref::<name>, position independent, with its include/ public in the build and install
# trees, installed into the hprefTargets export.
function(hpref_library name)
  add_library(hpref_${name} ${ARGN})
  add_library(hpref::${name} ALIAS hpref_${name})
  set_target_properties(hpref_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME hpref_${name}
    POSITION_INDEPENDENT_CODE ON)
  target_include_directories(hpref_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  install(TARGETS hpref_${name} EXPORT hprefTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# hpref_boost_tests(LABEL <label> TARGET <exe> MACRO <macro> MIN <n> TIMEOUT <s> SOURCES <src...>)
# One ctest entry `<label>.<name>` per Boost.Test case or suite that <macro>(<name>, ...) or
# <macro>(<name>) opens at the start of a line in the sources, run as
# `<exe> --run_test=<name>`. The list is read from the sources (a hand list once drifted
# from the code and registered names that no longer existed); configuring fails if fewer
# than MIN are found, and re-runs when a source changes.
function(hpref_boost_tests)
  cmake_parse_arguments(T "" "LABEL;TARGET;MACRO;MIN;TIMEOUT" "SOURCES" ${ARGN})
  set(names)
  foreach(src IN LISTS T_SOURCES)
    file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/${src} lines REGEX "^${T_MACRO}\\(")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^${T_MACRO}\\(([A-Za-z0-9_]+)[,)].*" "\\1" name "${line}")
      list(APPEND names ${name})
    endforeach()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  endforeach()
  list(LENGTH names count)
  if(count LESS T_MIN)
    message(FATAL_ERROR "found only ${count} ${T_MACRO} entries for ${T_LABEL} (at least ${T_MIN} expected)")
  endif()
  foreach(name IN LISTS names)
    add_test(NAME ${T_LABEL}.${name} COMMAND ${T_TARGET} --run_test=${name} --color_output=no)
    set_tests_properties(${T_LABEL}.${name} PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT})
  endforeach()
endfunction()

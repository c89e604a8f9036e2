# Installs hpref from HPREF_BUILD_DIR into WORK_DIR/prefix, then configures, builds and runs
# the downstream project against it (and its hpref::mpi program under mpirun, where MPI
# is built). Any failing step fails the test.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${HPREF_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${DOWNSTREAM_SOURCE} -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/downstream)
if(EXISTS ${WORK_DIR}/build/downstream_mpi)
  find_program(MPIRUN mpirun REQUIRED)
  run(${MPIRUN} --allow-run-as-root --oversubscribe -np 2 ${WORK_DIR}/build/downstream_mpi)
endif()

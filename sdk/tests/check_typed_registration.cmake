# cmake -DCXX=<compiler> -DSTD=<c++17|c++20> -DFLAGS=<a|b|c> -DSOURCE=<typed_registration.cpp> -P check_typed_registration.cmake
# Passes when the snippet compiles as add_op and fails to compile, with the
# registrar's static_assert, as add_dataset given the same Layer factory.
string(REPLACE "|" ";" _flags "${FLAGS}")
execute_process(COMMAND ${CXX} -std=${STD} -fsyntax-only ${_flags} ${SOURCE}
  RESULT_VARIABLE rc_ok OUTPUT_VARIABLE out_ok ERROR_VARIABLE out_ok)
if(NOT rc_ok EQUAL 0)
  message(FATAL_ERROR "control: add_op with a Layer factory does not compile:\n${out_ok}")
endif()
execute_process(COMMAND ${CXX} -std=${STD} -fsyntax-only -DWRONG ${_flags} ${SOURCE}
  RESULT_VARIABLE rc_bad OUTPUT_VARIABLE out_bad ERROR_VARIABLE out_bad)
if(rc_bad EQUAL 0)
  message(FATAL_ERROR "add_dataset accepted a factory that makes a vexp::Layer")
endif()
if(NOT out_bad MATCHES "the factory must return std::shared_ptr<T> with T derived from the interface this kind makes")
  message(FATAL_ERROR "add_dataset with a Layer factory failed to compile, but not with the registrar's message:\n${out_bad}")
endif()
message(STATUS "add_dataset with a Layer factory is refused at compile time; add_op accepts it")

# Warning flags for every moetrain target; MOETRAIN_WERROR (CI) turns them into errors.
function(moetrain_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unknown-pragmas>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${MOETRAIN_WERROR}>>:-Werror>)
endfunction()

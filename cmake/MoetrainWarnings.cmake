# Warning flags for every moetrain target; MOETRAIN_WERROR (CI) turns them into errors.
# GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string code at -O2/-O3
# (GCC bug 105329), so that one warning is off for GCC 12 only.
function(moetrain_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unknown-pragmas>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${MOETRAIN_WERROR}>>:-Werror>)
endfunction()

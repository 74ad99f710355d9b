# Embeds the text file IN as a C string in OUT: `const char <NAME>_text[]`
# (NUL-terminated) and `const size_t <NAME>_len`.  NAME defaults to
# fe_prelude (frontend/prelude.ir); codegen/cuda_special.h is embedded as
# cg_cuda_special (codegen/cuda.c prints it into CUDA C).
if(NOT NAME)
  set(NAME fe_prelude)
endif()
get_filename_component(base ${IN} NAME)
file(READ ${IN} text HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${text}")
file(WRITE ${OUT} "// generated from ${base} by cmake/embed.cmake\n#include <stddef.h>\nextern const char ${NAME}_text[];\nextern const size_t ${NAME}_len;\nconst char ${NAME}_text[] = {${bytes} 0};\nconst size_t ${NAME}_len = sizeof ${NAME}_text - 1;\n")

# Embeds the text file IN as a C string `fe_prelude_text` in OUT.
file(READ ${IN} text HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${text}")
file(WRITE ${OUT} "// generated from frontend/prelude.ir by cmake/embed.cmake\n#include <stddef.h>\nextern const char fe_prelude_text[];\nextern const size_t fe_prelude_len;\nconst char fe_prelude_text[] = {${bytes} 0};\nconst size_t fe_prelude_len = sizeof fe_prelude_text - 1;\n")

# Run last by `cmake --install` (install(SCRIPT), CMakeLists.txt): writes
# DATADIR/fadc/install-manifest.txt, every file and link this install
# wrote, one a line, relative to the prefix (so it stays true when the
# install is staged with DESTDIR or moved), itself last.
# cmake/uninstall.cmake reads it.  CMAKE_INSTALL_MANIFEST_FILES is the list
# cmake_install.cmake keeps of what it installed (with the prefix, without
# DESTDIR; folders of install(DIRECTORY) too, left out here);
# fadc_manifest, set by the install(CODE) before, is the manifest's path in
# the prefix.
string(REGEX REPLACE "/+$" "" prefix "${CMAKE_INSTALL_PREFIX}")
set(root "$ENV{DESTDIR}${prefix}")
string(LENGTH "${prefix}/" n)
set(text "")
foreach(f ${CMAKE_INSTALL_MANIFEST_FILES})
  string(SUBSTRING "${f}" 0 ${n} head)
  if(NOT head STREQUAL "${prefix}/")
    message(FATAL_ERROR "fadc: installed ${f}, outside the prefix ${prefix}")
  endif()
  string(SUBSTRING "${f}" ${n} -1 rel)
  if(IS_DIRECTORY "${root}/${rel}" AND NOT IS_SYMLINK "${root}/${rel}")
    continue()
  endif()
  string(APPEND text "${rel}\n")
endforeach()
string(APPEND text "${fadc_manifest}\n")
message(STATUS "Installing: ${root}/${fadc_manifest}")
file(WRITE "${root}/${fadc_manifest}" "${text}")

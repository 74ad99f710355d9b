# cmake -DROOT=DESTDIR+PREFIX [-DDATADIR=share] -P cmake/uninstall.cmake
# (`make uninstall`): removes every file that DATADIR/fadc/install-manifest.txt
# (cmake/manifest.cmake) lists under ROOT, the manifest last, then the
# folders of fadc's own (those whose path in the prefix has a component
# named fadc: lib/fadc, lib/cmake/fadc, share/fadc/...) once empty.  Shared
# folders (bin, lib, include, lib/pkgconfig) stay, as other packages' do.
# A line of the manifest that is absolute or climbs out of the prefix
# ("..") is refused before anything is removed.
if(NOT ROOT)
  message(FATAL_ERROR "fadc uninstall: ROOT (the install's DESTDIR and prefix) not given")
endif()
if(NOT DATADIR)
  set(DATADIR share)
endif()
string(REGEX REPLACE "/+$" "" ROOT "${ROOT}")
set(manifest "${ROOT}/${DATADIR}/fadc/install-manifest.txt")
if(NOT EXISTS "${manifest}")
  message(FATAL_ERROR "fadc uninstall: ${manifest}: no such file (is fadc installed under ${ROOT}?)")
endif()
file(STRINGS "${manifest}" files)
foreach(rel ${files})
  if(rel MATCHES "^/" OR rel MATCHES "(^|/)\\.\\.(/|$)")
    message(FATAL_ERROR "fadc uninstall: ${manifest}: '${rel}' is not a path inside the prefix")
  endif()
endforeach()
set(dirs "")
foreach(rel ${files})
  set(f "${ROOT}/${rel}")
  if(EXISTS "${f}" OR IS_SYMLINK "${f}")
    message(STATUS "Removing: ${f}")
    file(REMOVE "${f}")
  else()
    message(STATUS "Already gone: ${f}")
  endif()
  # The folders above it, up to the prefix, that are fadc's own.
  get_filename_component(d "${rel}" DIRECTORY)
  while(d)
    if(d MATCHES "(^|/)fadc(/|$)")
      list(APPEND dirs "${d}")
    endif()
    get_filename_component(d "${d}" DIRECTORY)
  endwhile()
endforeach()
# Deepest first, so a folder's subfolders are gone before it is looked at.
list(REMOVE_DUPLICATES dirs)
list(SORT dirs ORDER DESCENDING)
foreach(d ${dirs})
  file(GLOB left "${ROOT}/${d}/*" "${ROOT}/${d}/.*")
  if(IS_DIRECTORY "${ROOT}/${d}" AND NOT left)
    file(REMOVE_RECURSE "${ROOT}/${d}")
  elseif(left)
    message(STATUS "Kept ${ROOT}/${d}: it holds files fadc did not install")
  endif()
endforeach()

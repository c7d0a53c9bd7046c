# Links every entry of the package's source folder (SRC) into the build's package folder
# (DST), beside the extensions built there; stale links to removed files are dropped.
# Run at every build (cmake -P), so a new module appears without reconfiguring.
file(MAKE_DIRECTORY "${DST}")
file(GLOB _entries RELATIVE "${SRC}" "${SRC}/*")
foreach(_e IN LISTS _entries)
  if(_e MATCHES "^(_C.*\\.so|__pycache__)$")
    continue()
  endif()
  if(NOT IS_SYMLINK "${DST}/${_e}")
    file(CREATE_LINK "${SRC}/${_e}" "${DST}/${_e}" SYMBOLIC)
  endif()
endforeach()
file(GLOB _links RELATIVE "${DST}" "${DST}/*")
foreach(_e IN LISTS _links)
  if(IS_SYMLINK "${DST}/${_e}" AND NOT EXISTS "${DST}/${_e}")
    file(REMOVE "${DST}/${_e}")
  endif()
endforeach()

# The installed onnxexec: the public library (shared and static), its one header, the tool
# and its man page, a pkg-config file and a CMake package.
#
#     cmake --install build --prefix P
#
#   P/lib/libonnxexec.so.0.1.0         the shared library (SONAME libonnxexec.so.1), with the
#   P/lib/libonnxexec.so.1, .so        links; it exports the functions of onnxexec.h only
#   P/lib/libonnxexec.a                the static library: one object whose other symbols are
#                                      local (no clash with a program's own names)
#   P/include/onnxexec.h               the API
#   P/bin/onnxexec                     the tool (linked statically with the library)
#   P/share/man/man1/onnxexec.1        its manual page (tools/onnxexec.1)
#   P/lib/python3/dist-packages/onnxexec.py   the Python module (python/onnxexec.py)
#   P/lib/pkgconfig/onnxexec.pc        pkg-config: `pkg-config --cflags --libs onnxexec`,
#                                      `--static` for libonnxexec.a's own dependencies
#   P/lib/cmake/onnxexec/              find_package(onnxexec): onnxexec::onnxexec (shared),
#                                      onnxexec::onnxexec_static
#
# (lib is CMAKE_INSTALL_LIBDIR: lib/<multiarch> when the prefix is /usr on Debian.)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# ox_version() reports the header's version; it must be the project's.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/onnxexec.h ox_version_defines
     REGEX "^#define OX_VERSION_(MAJOR|MINOR|PATCH) +[0-9]+$")
string(REGEX REPLACE "[^;]*OX_VERSION_[A-Z]+ +([0-9]+)" "\\1" ox_header_version
                     "${ox_version_defines}")
string(REPLACE ";" "." ox_header_version "${ox_header_version}")
if(NOT ox_header_version STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/onnxexec.h says version ${ox_header_version}, "
                      "CMakeLists.txt's project() says ${PROJECT_VERSION}: make them agree")
endif()

# The ABI number, the SONAME's: libonnxexec.so.${OX_SOVERSION}. Raise it with every change
# that breaks binary compatibility (a function removed or its signature changed, a public
# struct's layout or an enum's values changed), before 1.0 too. From 1.0 on it is the major
# version (README.md, "Install"). 1: ox_session_options gained batch_split, device and
# precision, ox_compare_side device and precision (a program built against 0 passes a
# shorter struct).
set(OX_SOVERSION 1)

# What libonnxexec needs beyond libc: protobuf-c, BLAS, libm, pthread (zlib is the tool's,
# not the library's). As link items a consumer can use: a library in the linker's default
# path by its name, anything else by its full path.
set(ox_link_deps)
foreach(lib IN LISTS PROTOBUF_C_LINK_LIBRARIES BLAS_LIBRARIES M_LIB)
  get_filename_component(dir "${lib}" DIRECTORY)
  get_filename_component(file "${lib}" NAME)
  if(dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES AND file MATCHES "^lib(.+)\\.(so|a)(\\..*)?$")
    list(APPEND ox_link_deps ${CMAKE_MATCH_1})
  else()
    list(APPEND ox_link_deps "${lib}")
  endif()
endforeach()
list(APPEND ox_link_deps pthread ${CMAKE_DL_LIBS})
list(REMOVE_DUPLICATES ox_link_deps)

set(ox_public_include $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# libonnxexec.so: the hidden-visibility objects, linked with every dependency named
# (--no-undefined), so that a program links it alone.
add_library(onnxexec_shared SHARED)
target_link_libraries(onnxexec_shared PRIVATE onnxexec_objs)
target_include_directories(onnxexec_shared INTERFACE ${ox_public_include})
target_link_options(onnxexec_shared PRIVATE LINKER:--no-undefined)
set_target_properties(onnxexec_shared PROPERTIES OUTPUT_NAME onnxexec EXPORT_NAME onnxexec
                      VERSION ${PROJECT_VERSION} SOVERSION ${OX_SOVERSION})

# libonnxexec.a: the same objects and the protobuf-c code linked into one relocatable
# object (ld -r) whose hidden symbols are then made local, so that a static program sees
# the API alone, as a shared one does (the internal ox_* functions and the onnx__*
# descriptors would otherwise be global names in the program).
if(NOT CMAKE_LINKER OR NOT CMAKE_OBJCOPY)
  message(FATAL_ERROR "libonnxexec.a needs a linker (ld -r) and objcopy (binutils)")
endif()
set(ox_static_object ${CMAKE_CURRENT_BINARY_DIR}/libonnxexec_static.o)
add_custom_command(
  OUTPUT ${ox_static_object}
  COMMAND ${CMAKE_LINKER} -r -o ${ox_static_object} $<TARGET_OBJECTS:onnxexec_objs>
          $<TARGET_OBJECTS:ox_onnx_proto>
  COMMAND ${CMAKE_OBJCOPY} --localize-hidden ${ox_static_object}
  DEPENDS onnxexec_objs ox_onnx_proto $<TARGET_OBJECTS:onnxexec_objs>
          $<TARGET_OBJECTS:ox_onnx_proto>
  COMMENT "Linking libonnxexec_static.o (ld -r; objcopy --localize-hidden)"
  COMMAND_EXPAND_LISTS VERBATIM)
add_library(onnxexec_static STATIC ${ox_static_object})
target_include_directories(onnxexec_static INTERFACE ${ox_public_include})
target_link_libraries(onnxexec_static INTERFACE ${ox_link_deps})
set_target_properties(onnxexec_static PROPERTIES OUTPUT_NAME onnxexec EXPORT_NAME onnxexec_static
                      LINKER_LANGUAGE C)

install(TARGETS onnxexec_shared onnxexec_static EXPORT onnxexecTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS onnxexec RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/onnxexec.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/tools/onnxexec.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# The Python module (python/onnxexec.py, ctypes over libonnxexec.so.1) where Debian's Python
# looks: PREFIX/lib/python3/dist-packages (on sys.path for /usr and /usr/local; elsewhere
# PYTHONPATH). The installed copy finds the library through the path from its folder to
# the library's, written into it here.
set(OX_PYTHON_DIR "lib/python3/dist-packages"
    CACHE STRING "where cmake --install puts onnxexec.py (relative to the prefix, or absolute)")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
                                       ${PROJECT_SOURCE_DIR}/python/onnxexec.py)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ox_py_libdir "${CMAKE_INSTALL_LIBDIR}")
elseif(IS_ABSOLUTE "${OX_PYTHON_DIR}")
  set(ox_py_libdir "${CMAKE_INSTALL_FULL_LIBDIR}")
else()
  file(RELATIVE_PATH ox_py_libdir /prefix/${OX_PYTHON_DIR} /prefix/${CMAKE_INSTALL_LIBDIR})
endif()
file(READ ${PROJECT_SOURCE_DIR}/python/onnxexec.py ox_py_module)
string(REPLACE "\n_LIBDIR_FROM_MODULE = None\n" "\n_LIBDIR_FROM_MODULE = \"${ox_py_libdir}\"\n"
               ox_py_module "${ox_py_module}")
file(WRITE ${PROJECT_BINARY_DIR}/python/onnxexec.py "${ox_py_module}")
install(FILES ${PROJECT_BINARY_DIR}/python/onnxexec.py DESTINATION ${OX_PYTHON_DIR})

# CMake package. Before 1.0 a minor version may change the API, so only the same minor
# version is compatible; from 1.0, the same major version.
set(ox_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/onnxexec)
install(EXPORT onnxexecTargets NAMESPACE onnxexec:: DESTINATION ${ox_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/tools/cmake/onnxexecConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/onnxexecConfig.cmake
                              INSTALL_DESTINATION ${ox_cmake_dir})
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(ox_compatibility SameMinorVersion)
else()
  set(ox_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/onnxexecConfigVersion.cmake
                                 COMPATIBILITY ${ox_compatibility})
install(FILES ${PROJECT_BINARY_DIR}/onnxexecConfig.cmake
              ${PROJECT_BINARY_DIR}/onnxexecConfigVersion.cmake DESTINATION ${ox_cmake_dir})

# pkg-config. The dependencies are private: the shared library records its own, a static
# link (`pkg-config --static`) needs them. Those with a .pc file of their own go to
# Requires.private (it knows their dependencies in turn, e.g. OpenBLAS's libgfortran),
# the others to Libs.private.
set(OX_PC_REQUIRES_PRIVATE libprotobuf-c)
set(OX_PC_LIBS_PRIVATE)
pkg_check_modules(OX_PC_OPENBLAS QUIET openblas)
foreach(dep IN LISTS ox_link_deps)
  if(dep STREQUAL "protobuf-c")
    continue()
  elseif(dep STREQUAL "openblas" AND OX_PC_OPENBLAS_FOUND)
    list(APPEND OX_PC_REQUIRES_PRIVATE openblas)
  elseif(IS_ABSOLUTE "${dep}")
    list(APPEND OX_PC_LIBS_PRIVATE "${dep}")
  else()
    list(APPEND OX_PC_LIBS_PRIVATE "-l${dep}")
  endif()
endforeach()
string(REPLACE ";" ", " OX_PC_REQUIRES_PRIVATE "${OX_PC_REQUIRES_PRIVATE}")
string(REPLACE ";" " " OX_PC_LIBS_PRIVATE "${OX_PC_LIBS_PRIVATE}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(OX_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(OX_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# The prefix is known at install time only (cmake --install --prefix P): the file is
# configured twice, the second time by the install step.
set(OX_PC_PREFIX "@OX_PC_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/tools/cmake/onnxexec.pc.in ${PROJECT_BINARY_DIR}/onnxexec.pc.in
               @ONLY)
install(CODE "set(OX_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
configure_file(\"${PROJECT_BINARY_DIR}/onnxexec.pc.in\" \"${PROJECT_BINARY_DIR}/onnxexec.pc\"
               @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/onnxexec.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

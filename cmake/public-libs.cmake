# The public libraries, made from the same objects as ferrox_internal
# (FX_LIB_OBJECTS): both define only the FX_API (fx_) names of ferrox.h;
# tests/check-symbols.sh checks it with nm. fx_serve is not in them: it
# lives in ferrox_server with libmicrohttpd, which only the CLI links.

# libferrox.so (SONAME libferrox.so.0): hidden visibility does the work.
add_library(ferrox_shared SHARED ${FX_LIB_OBJECTS})
set_target_properties(ferrox_shared PROPERTIES OUTPUT_NAME ferrox
                      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_include_directories(ferrox_shared INTERFACE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(ferrox_shared PRIVATE ${FX_LIB_DEPS})
# Every undefined symbol resolved by the libraries above; the sanitizer
# builds leave their runtime's symbols to the executable (clang).
if(NOT FX_SANITIZE AND NOT FX_FUZZ)
  target_link_options(ferrox_shared PRIVATE -Wl,--no-undefined)
endif()

# libferrox.a: an archive keeps hidden symbols global (visibility applies
# when a shared object or executable is linked), so the objects are first
# linked into one relocatable object, where the internal references are
# resolved, and its hidden symbols are then made local.
set(FX_PUBLIC_OBJ ${CMAKE_BINARY_DIR}/ferrox_public.o)
add_custom_command(OUTPUT ${FX_PUBLIC_OBJ}
  COMMAND ${CMAKE_LINKER} -r -o ${FX_PUBLIC_OBJ} ${FX_LIB_OBJECTS}
  COMMAND ${CMAKE_OBJCOPY} --localize-hidden ${FX_PUBLIC_OBJ}
  DEPENDS ${FX_LIB_OBJECTS} ${FX_LIB_OBJECT_TARGETS}
  COMMENT "Linking ferrox_public.o (hidden symbols made local)"
  COMMAND_EXPAND_LISTS VERBATIM)
set_source_files_properties(${FX_PUBLIC_OBJ} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
add_library(ferrox_static STATIC ${FX_PUBLIC_OBJ})
set_target_properties(ferrox_static PROPERTIES OUTPUT_NAME ferrox LINKER_LANGUAGE C)
target_include_directories(ferrox_static INTERFACE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(ferrox_static INTERFACE ${FX_LIB_DEPS})

# Installed with the header and two pkg-config files: ferrox (the shared
# library) and ferrox-static (the archive by path, then its dependencies).
include(GNUInstallDirs)
file(RELATIVE_PATH FX_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${CMAKE_SOURCE_DIR}/cmake/ferrox.pc.in ${CMAKE_BINARY_DIR}/ferrox.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/ferrox-static.pc.in ${CMAKE_BINARY_DIR}/ferrox-static.pc @ONLY)
install(TARGETS ferrox_shared ferrox_static
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/ferrox.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/ferrox.pc ${CMAKE_BINARY_DIR}/ferrox-static.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

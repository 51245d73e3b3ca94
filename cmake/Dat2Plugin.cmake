# dat2_add_plugin(<target> MAP <version script> LIBS <libraries...> SOURCES <files...>)
# A provider plugin: a module named lib<target>.so linking the kit, with
# only the symbols its version script exports, installed beside the other
# plugins. Providers resolve the registry's functions from the global scope:
# no link to libdat2 (the OFED registry can load them too).
function(dat2_add_plugin target)
  cmake_parse_arguments(P "" "MAP" "LIBS;SOURCES" ${ARGN})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE dat2_kit ${P_LIBS})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(${target} PRIVATE -fvisibility=hidden -fvisibility-inlines-hidden)
  set_target_properties(${target} PROPERTIES PREFIX "lib" LINK_DEPENDS ${P_MAP})
  target_link_options(${target} PRIVATE -Wl,--version-script=${P_MAP})
  install(TARGETS ${target} LIBRARY DESTINATION ${DAT2_PLUGIN_INSTALL_DIR} COMPONENT runtime)
endfunction()

/*
 * lathe's one native helper: give freed heap memory back to the kernel (glibc malloc_trim(3)).
 *
 * Why: under hours of full-speed proxying, glibc keeps memory that Node has already freed (socket
 * reads, zlib output, file windows of 64 KiB to 1 MiB, freed from other threads' arenas) as
 * fragmented free chunks inside its arenas, so RSS creeps up although nothing is alive (measured
 * with `npm run soak`: V8 heap and live ArrayBuffers flat, "other" anonymous memory growing).
 * malloc_trim(0) returns the free pages of every arena (madvise MADV_DONTNEED), not only the
 * top of the main heap. It cannot be reached from JavaScript, hence this addon (Node-API, so one
 * build serves every Node version).
 *
 * Elsewhere than glibc (musl, macOS) there is nothing to call: trim() answers false.
 */
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  int released = 0;
#if defined(__GLIBC__)
  released = malloc_trim(0);
#endif
  napi_value out;
  napi_get_boolean(env, released != 0, &out);
  return out;
}

static napi_value Supported(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
#if defined(__GLIBC__)
  napi_get_boolean(env, 1, &out);
#else
  napi_get_boolean(env, 0, &out);
#endif
  return out;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &fn);
  napi_set_named_property(env, exports, "trim", fn);
  napi_create_function(env, "supported", NAPI_AUTO_LENGTH, Supported, NULL, &fn);
  napi_set_named_property(env, exports, "supported", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)

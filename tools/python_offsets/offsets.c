/*
 * Prints, as one JSON object, the offsets pkprof needs to walk a CPython 3.11+ interpreter's frame
 * chain (docs/design.md, "Python frames"), taken from the interpreter's own internal headers with
 * offsetof: built once per minor version by gen.sh against that version's installed headers.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"

#define F(name, val) printf("%s    \"%s\": %lu", first ? "" : ",\n", name, (unsigned long)(val)), first = 0

int main(void)
{
	int first = 1;

	printf("{\n");
	F("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
	F("interp_threads_head", offsetof(PyInterpreterState, threads.head));
	F("tstate_next", offsetof(PyThreadState, next));
	F("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#if PY_VERSION_HEX >= 0x030d0000
	/* 3.13: the thread state points at its current frame itself. */
	F("tstate_cframe", 0);
	F("tstate_current_frame", offsetof(PyThreadState, current_frame));
	F("frame_code", offsetof(_PyInterpreterFrame, f_executable));
	F("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
	F("frame_instr_is_current", 1);
#else
	F("tstate_cframe", offsetof(PyThreadState, cframe));
	F("tstate_current_frame", offsetof(_PyCFrame, current_frame));
	F("frame_code", offsetof(_PyInterpreterFrame, f_code));
	F("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
	F("frame_instr_is_current", 0);
#endif
	F("frame_previous", offsetof(_PyInterpreterFrame, previous));
	F("frame_owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX >= 0x030c0000
	/* 3.12+: an eval loop's entry is a shim frame owned by the C stack below its first frame. */
	F("frame_is_entry", 0);
	F("owned_by_cstack", FRAME_OWNED_BY_CSTACK);
#else
	F("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
	F("owned_by_cstack", 0);
#endif
	F("code_filename", offsetof(PyCodeObject, co_filename));
	F("code_name", offsetof(PyCodeObject, co_name));
	F("code_qualname", offsetof(PyCodeObject, co_qualname));
	F("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	F("code_linetable", offsetof(PyCodeObject, co_linetable));
	F("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
	F("object_type", offsetof(PyObject, ob_type));
	F("bytes_size", offsetof(PyVarObject, ob_size));
	F("bytes_sval", offsetof(PyBytesObject, ob_sval));
	F("unicode_length", offsetof(PyASCIIObject, length));
	F("unicode_state", offsetof(PyASCIIObject, state));
	F("unicode_ascii_size", sizeof(PyASCIIObject));
	F("unicode_compact_size", sizeof(PyCompactUnicodeObject));
	printf("\n}");
	return 0;
}

# A Python process whose frame chain is garbage (issue #32's safety test):
# one thread makes its two innermost frames each other's caller (a loop)
# and gives one of them a code object address that points nowhere, then
# sleeps in a loop that never returns into them. Offsets:
# CPython 3.11 on x86-64 (PyThreadState.cframe 56, _PyCFrame.current_frame
# 8, _PyInterpreterFrame.f_code 32 and .previous 48).
import ctypes, os, threading, time

def word(addr):
    return ctypes.c_uint64.from_address(addr)

def poison():
    ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
    ts = ctypes.pythonapi.PyThreadState_Get()
    frame = word(word(ts + 56).value + 8).value  # this function's frame
    caller = word(frame + 48).value
    word(caller + 48).value = frame  # a loop of two frames
    word(caller + 32).value = 0x10  # a code object nowhere
    print("ready", os.getpid(), threading.get_native_id(), flush=True)
    while True:  # never returns into the broken chain
        time.sleep(0.05)

def poisoned_caller():
    poison()

threading.Thread(target=poisoned_caller, daemon=True).start()
time.sleep(1000)

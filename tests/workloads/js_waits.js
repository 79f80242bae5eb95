// A node program blocked in js_inner under js_outer (Atomics.wait: a futex
// wait inside the JS function), for python_frames_test.cpp's perf-map check
// (issue #32): run with --perf-basic-prof, its JIT code is named in
// /tmp/perf-PID.map. Prints "ready PID" once its functions are compiled.
const cell = new Int32Array(new SharedArrayBuffer(4));

function js_inner() {
  Atomics.wait(cell, 0, 0, 20);
}

function js_outer(n) {
  for (let i = 0; i < n; i++)
    js_inner();
}

js_outer(5); // compiled before the first trace
console.log("ready " + process.pid);
js_outer(1e9);

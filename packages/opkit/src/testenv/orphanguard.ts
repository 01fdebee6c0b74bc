/**
 * Preloaded (`node --import`) into processes that `startOperatorProcess` starts: when the test process
 * that started this one is gone — killed, crashed, or ended without stopping it — it sends itself
 * SIGTERM (the operator's graceful stop), and SIGKILL if that has not ended it ten seconds later. A
 * killed test run therefore never leaves an operator talking to a control plane that is being torn down.
 * It keeps no event loop alive of its own.
 */
const parent = process.ppid;
let since = 0;
const timer = setInterval(() => {
  if (process.ppid === parent) return;
  if (since === 0) {
    since = Date.now();
    process.kill(process.pid, "SIGTERM");
  } else if (Date.now() - since > 10_000) process.kill(process.pid, "SIGKILL");
}, 500);
timer.unref();

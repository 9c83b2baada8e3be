--#include lib/numbers.lua
--#include lib/counters.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/bucket.lua
--#include lib/sliding_log.lua
return {1}

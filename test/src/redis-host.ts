// Every spawned process binds only this address: none has a password, and the sentinels run with
// protected-mode off.
export const HOST = '127.0.0.1'

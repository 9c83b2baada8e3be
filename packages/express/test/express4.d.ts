// Express 4 installed under an alias to test the lower end of the peer range; its API is the same for these tests.
declare module 'express4' {
  import express from 'express'
  export default express
}

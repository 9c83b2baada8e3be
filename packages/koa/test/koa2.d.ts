// Koa 2 installed under an alias to test the lower end of the peer range; its API is the same for these tests.
declare module 'koa2' {
  import Koa from 'koa'
  export default Koa
}

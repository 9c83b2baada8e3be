import { Controller, Get } from '@nestjs/common'

// No decorator: the module's rule, api.read, counted for the x-user-id header or the address.
@Controller('api/items')
export class ItemsController {
  @Get()
  list() {
    return { items: [{ id: 1, name: 'first' }] }
  }
}

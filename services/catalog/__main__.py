from services.catalog.server import main

main()

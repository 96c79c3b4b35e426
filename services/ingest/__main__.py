from services.host import main

main(["ingest"])

from pods_api.core.cli import main

main()

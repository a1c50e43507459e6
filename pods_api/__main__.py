from pods_api.serve.cli import main

main()

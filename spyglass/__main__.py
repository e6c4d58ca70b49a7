from spyglass.cli.launch import main

main()

from lazarus.cli import main

main()
